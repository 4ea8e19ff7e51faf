package egress

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// domainCase is an entry of a domain list with its canonical form, or the error a list holding
// it gets. testdata/domain_cases.json holds them; the admission policy's integration test runs
// the same file through the API server, so Go and CEL agree on every row.
type domainCase struct {
	In      string `json:"in"`
	Want    string `json:"want"`
	WantErr string `json:"wantErr"`
}

func domainCases(t testing.TB) []domainCase {
	data, err := os.ReadFile("testdata/domain_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []domainCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("testdata/domain_cases.json: %v", err)
	}
	return cases
}

func TestParseDomain(t *testing.T) {
	for _, tc := range domainCases(t) {
		t.Run(tc.In, func(t *testing.T) {
			got, err := ParseDomain(tc.In)
			if tc.WantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.WantErr) {
					t.Fatalf("ParseDomain(%q) = %q, %v; want an error containing %q", tc.In, got, err, tc.WantErr)
				}
				return
			}
			if err != nil || got != tc.Want {
				t.Errorf("ParseDomain(%q) = %q, %v; want %q", tc.In, got, err, tc.Want)
			}
		})
	}
}

func TestParseDomains(t *testing.T) {
	many := make([]string, MaxDomains+1)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example.com", i)
	}
	cases := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{"order kept, duplicates dropped after lower-casing", []string{"b.example", "A.example", "a.example.", "b.example"},
			[]string{"b.example", "a.example"}, ""},
		{"exactly the maximum", many[:MaxDomains], many[:MaxDomains], ""},
		{"one too many", many, nil, "65 egress domains; a list holds at most 64"},
		{"the first bad entry is named", []string{"ok.example", "10.1.1.1", "*"}, nil, `egress domain "10.1.1.1" is an IP address`},
		{"empty entry", []string{" "}, nil, "empty egress domain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDomains(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseDomains = %v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseDomains = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestFromAnnotationsWithDomains(t *testing.T) {
	const (
		mode     = agentsv1alpha1.EgressAnnotation
		cidrs    = agentsv1alpha1.EgressCIDRsAnnotation
		domains  = agentsv1alpha1.EgressDomainsAnnotation
		failOpen = agentsv1alpha1.EgressDomainsFailOpenAnnotation
	)
	cases := []struct {
		name        string
		annotations map[string]string
		want        Spec
		wantErr     string
	}{
		{"names beside CIDRs, space and comma separated", map[string]string{mode: "restricted", cidrs: "10.0.0.0/8", domains: "PyPI.org *.github.com,\nfiles.pythonhosted.org"},
			Spec{Mode: Restricted, CIDRs: []string{"10.0.0.0/8"}, Domains: []string{"pypi.org", "*.github.com", "files.pythonhosted.org"}}, ""},
		{"names alone", map[string]string{mode: "restricted", domains: "pypi.org"}, Spec{Mode: Restricted, Domains: []string{"pypi.org"}}, ""},
		{"fail-open", map[string]string{mode: "restricted", domains: "pypi.org", failOpen: "true"},
			Spec{Mode: Restricted, Domains: []string{"pypi.org"}, DomainsFailOpen: true}, ""},
		{"fail-open false is fail-closed", map[string]string{mode: "restricted", domains: "pypi.org", failOpen: "false"},
			Spec{Mode: Restricted, Domains: []string{"pypi.org"}}, ""},
		{"fail-open without names means nothing", map[string]string{mode: "restricted", failOpen: "true"}, Spec{Mode: Restricted}, ""},
		{"names are ignored by deny-all", map[string]string{mode: "deny-all", domains: "pypi.org"}, Spec{Mode: DenyAll}, ""},
		{"names without a mode", map[string]string{domains: "pypi.org"}, Spec{},
			"annotation agents.x-k8s.io/egress-domains is set but agents.x-k8s.io/egress is not; add agents.x-k8s.io/egress: restricted"},
		{"a bad name names the domain annotation", map[string]string{mode: "restricted", domains: "pypi.org,*"}, Spec{},
			`annotation agents.x-k8s.io/egress-domains: egress domain "*" would allow every name`},
		{"a bad fail-open value", map[string]string{mode: "restricted", domains: "pypi.org", failOpen: "yes"}, Spec{},
			`annotation agents.x-k8s.io/egress-domains-fail-open: "yes" is neither "true" nor "false"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, requested, err := FromAnnotations(tc.annotations)
			if !requested {
				t.Errorf("requested = false, want true")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FromAnnotations = %+v, %v; want %+v", got, err, tc.want)
			}
			back, _, err := FromAnnotations(got.Annotations())
			if err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("FromAnnotations(Annotations()) = %+v, %v; want %+v", back, err, got)
			}
		})
	}
}

func TestTemplateDomains(t *testing.T) {
	const domains, failOpen = agentsv1alpha1.EgressDomainsAnnotation, agentsv1alpha1.EgressDomainsFailOpenAnnotation
	cases := []struct {
		name         string
		annotations  map[string]string
		want         []string
		wantFailOpen bool
		wantErr      string
	}{
		{"no list", map[string]string{failOpen: "true"}, nil, false, ""},
		{"a list", map[string]string{domains: "allowed.test,*.allowed.test"}, []string{"allowed.test", "*.allowed.test"}, false, ""},
		{"a list, fail-open", map[string]string{domains: "allowed.test", failOpen: "true"}, []string{"allowed.test"}, true, ""},
		{"an empty list is a mistake", map[string]string{domains: " , "}, nil, false, "annotation agents.x-k8s.io/egress-domains is empty"},
		{"a bad entry", map[string]string{domains: "1.2.3.4"}, nil, false, `annotation agents.x-k8s.io/egress-domains: egress domain "1.2.3.4" is an IP address`},
		{"a bad fail-open", map[string]string{domains: "a.test", failOpen: "1"}, nil, false, "is neither"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, open, err := TemplateDomains(tc.annotations)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) || open != tc.wantFailOpen {
				t.Errorf("TemplateDomains = %v, %v, %v; want %v, %v", got, open, err, tc.want, tc.wantFailOpen)
			}
		})
	}
}

func TestSummaryNamesTheDomains(t *testing.T) {
	cases := []struct {
		spec Spec
		want string
	}{
		{Spec{Mode: Restricted, Domains: []string{"pypi.org", "*.github.com"}}, "restricted to pypi.org,*.github.com"},
		{Spec{Mode: Restricted, CIDRs: []string{"10.0.0.0/8"}, Domains: []string{"pypi.org"}}, "restricted to 10.0.0.0/8 and pypi.org"},
		{Spec{Mode: Restricted, Domains: []string{"pypi.org"}, DomainsFailOpen: true}, "restricted to pypi.org (fail-open)"},
		{Spec{Mode: Restricted, CIDRs: []string{"10.0.0.0/8"}}, "restricted to 10.0.0.0/8"},
	}
	for _, tc := range cases {
		if got := tc.spec.Summary(); got != tc.want {
			t.Errorf("Summary(%+v) = %q, want %q", tc.spec, got, tc.want)
		}
	}
}

// A condition written for one list never reads as in force for another: the SDK waits on it.
func TestAppliedTellsDomainListsApart(t *testing.T) {
	specs := []Spec{
		{Mode: Restricted, CIDRs: []string{"10.0.0.0/8"}},
		{Mode: Restricted, CIDRs: []string{"10.0.0.0/8"}, Domains: []string{"pypi.org"}},
		{Mode: Restricted, Domains: []string{"pypi.org"}},
		{Mode: Restricted, Domains: []string{"pypi.org"}, DomainsFailOpen: true},
		{Mode: Restricted, Domains: []string{"pypi.org", "*.pypi.org"}},
	}
	for i, a := range specs {
		msgs := []string{a.AppliedMessage("fp-1")}
		if a.DomainsFailOpen {
			msgs = append(msgs, a.FailOpenMessage("fp-1"))
		}
		for _, msg := range msgs {
			for j, b := range specs {
				if got := b.Applied(msg); got != (i == j) {
					t.Errorf("%q.Applied(%q) = %v", b.Summary(), msg, got)
				}
			}
		}
	}
}

// Whatever a tenant writes, an accepted entry is canonical (parsing it again changes nothing)
// and holds no wildcard but a leading "*.".
func FuzzParseDomain(f *testing.F) {
	for _, tc := range domainCases(f) {
		f.Add(tc.In)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDomain(s)
		if err != nil {
			return
		}
		again, err := ParseDomain(d)
		if err != nil || again != d {
			t.Fatalf("ParseDomain(%q) = %q, but ParseDomain(%q) = %q, %v", s, d, d, again, err)
		}
		if strings.Contains(strings.TrimPrefix(d, "*."), "*") || len(d) > MaxDomainLength || d != strings.ToLower(d) || !isASCII(d) {
			t.Fatalf("ParseDomain(%q) = %q: not a canonical entry", s, d)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
