// Package step runs the local cluster as an ordered list of steps, as kind runs its create
// actions: Up runs each step's Up in order and stops at the first failure; Down runs every
// step's Down in reverse order, all of them even when some fail. A step that changes the host
// records what it is about to change in a Store (files in the state dir) before it changes it,
// so that its Down restores exactly that, also in a later process after a crashed Up.
package step

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Step is one part of the cluster.
type Step interface {
	// Name names the step in errors and its record.
	Name() string
	// Up makes the step's part of the cluster, or keeps it when it is already there.
	Up(ctx context.Context) error
	// Down undoes what Up did, from what it recorded; with nothing recorded it does nothing.
	// It removes its record only once everything recorded is undone.
	Down(ctx context.Context) error
}

// Up runs each step's Up in order and stops at the first failure.
func Up(ctx context.Context, steps []Step) error {
	for _, s := range steps {
		if err := s.Up(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.Name(), err)
		}
	}
	return nil
}

// Down runs every step's Down in reverse order, going on past failures, and reports them all.
// warn, when set, hears of each failure as it happens.
func Down(ctx context.Context, steps []Step, warn func(step string, err error)) error {
	var errs []error
	for i := len(steps) - 1; i >= 0; i-- {
		if err := steps[i].Down(ctx); err != nil {
			if warn != nil {
				warn(steps[i].Name(), err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", steps[i].Name(), err))
		}
	}
	return errors.Join(errs...)
}

// Store keeps each step's record of the host as a JSON file <Dir>/<step>.json.
type Store struct{ Dir string }

func (s Store) path(name string) string { return filepath.Join(s.Dir, name+".json") }

// Load reads a step's record into v and reports whether there was one.
func (s Store) Load(name string, v any) (bool, error) {
	data, err := os.ReadFile(s.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("record %s: %w", s.path(name), err)
	}
	return true, nil
}

// Save writes a step's record, atomically: a crash leaves the old record or the new one.
func (s Store) Save(name string, v any) error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path(name) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.path(name))
}

// Remove deletes a step's record (none is fine).
func (s Store) Remove(name string) error {
	if err := os.Remove(s.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Empty reports whether no step has a record left.
func (s Store) Empty() bool {
	m, _ := filepath.Glob(filepath.Join(s.Dir, "*.json"))
	return len(m) == 0
}
