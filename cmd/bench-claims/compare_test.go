package main

import (
	"slices"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/test/bench"
)

func TestAComparisonPassesOnEveryFlagButItsOwn(t *testing.T) {
	cases := []struct {
		args, want []string
	}{
		{[]string{"--compare", "main", "--rounds", "2", "--pool", "50"}, []string{"--pool", "50"}},
		{[]string{"-compare=HEAD~1", "-rate=10", "-out", "bin/x", "-profile"}, []string{"-rate=10", "-profile"}},
		{[]string{"--scenario", "cold", "--runs=4", "--compare", "v1"}, []string{"--scenario", "cold"}},
		{[]string{"--compare-harness", "own", "--compare=v1", "--nodes", "5"}, []string{"--nodes", "5"}},
	}
	for _, tc := range cases {
		if got := passedOn(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("passedOn(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestComparedBuildsTakeTurnsGoingFirst(t *testing.T) {
	got := alternate("base", "head", 3)
	want := []string{"base", "head", "head", "base", "base", "head"}
	if !slices.Equal(got, want) {
		t.Errorf("alternate = %q, want %q", got, want)
	}
}

// A run the machine sampler warned about is left out of the quiet runs' medians; one from a
// harness without the sampler counts as quiet (it cannot say otherwise).
func TestQuietRunsLeaveOutTheRunsThatSharedTheMachine(t *testing.T) {
	loud := &bench.Report{Scenario: "loud", Machine: &bench.Machine{Warnings: []string{"0.5 cores went to work outside the bench"}}}
	quiet := &bench.Report{Scenario: "quiet", Machine: &bench.Machine{}}
	old := &bench.Report{Scenario: "old"}
	got := quietRuns([]*bench.Report{loud, quiet, old})
	if len(got) != 2 || got[0] != quiet || got[1] != old {
		names := []string{}
		for _, r := range got {
			names = append(names, r.Scenario)
		}
		t.Errorf("quiet runs %q, want [quiet old]", names)
	}
}
