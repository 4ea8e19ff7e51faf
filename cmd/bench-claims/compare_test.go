package main

import (
	"slices"
	"testing"
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
