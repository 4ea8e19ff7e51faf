package execapi

import "testing"

func TestRingBuffer(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		writes []string
		from   int64
		want   string
		lost   bool
	}{
		{"empty", 4, nil, 0, "", false},
		{"fits", 8, []string{"abc", "de"}, 0, "abcde", false},
		{"wraps", 4, []string{"abc", "def"}, 0, "cdef", true},
		{"big write", 4, []string{"abcdefgh"}, 0, "efgh", true},
		{"from offset", 8, []string{"abc", "def"}, 4, "ef", false},
		{"offset at end", 8, []string{"abc"}, 3, "", false},
		{"exact fill", 3, []string{"a", "bc", "d"}, 1, "bcd", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRingBuffer(tc.size)
			for _, w := range tc.writes {
				r.Write([]byte(w))
			}
			got, next, lost := r.readFrom(tc.from)
			if string(got) != tc.want || lost != tc.lost || next != r.total {
				t.Fatalf("got %q lost %v next %d (total %d)", got, lost, next, r.total)
			}
		})
	}
}
