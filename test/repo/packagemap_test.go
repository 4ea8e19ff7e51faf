package repo

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository's top folder, seen from this package's.
const repoRoot = "../.."

// CONTRIBUTING.md's package map is where a newcomer looks for code: every Go package of the
// repository (nested modules too) has a row, every row names something that exists, and every
// script under hack/ is named.
func TestContributingPackageMapMatchesTheTree(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := packageMapSection(t, string(doc))
	mapped := mappedPaths(section)
	packages := goPackageDirs(t)

	for _, pkg := range packages {
		if !slices.Contains(mapped, pkg) {
			t.Errorf("Go package %s has no row in CONTRIBUTING.md's package map: add `%s` with what it holds", pkg, pkg)
		}
	}
	for _, p := range mapped {
		if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
			t.Errorf("CONTRIBUTING.md's package map names %s, which does not exist: remove or rename its row", p)
		}
	}
	scripts, err := filepath.Glob(filepath.Join(repoRoot, "hack", "*.*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scripts {
		if !strings.Contains(section, "`"+filepath.Base(s)+"`") {
			t.Errorf("hack/%s is not named in CONTRIBUTING.md's package map (the hack row): say what it does", filepath.Base(s))
		}
	}
}

// packageMapSection is the text from "## Package map" to the next second-level heading.
func packageMapSection(t *testing.T, doc string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n## Package map\n")
	if !ok {
		t.Fatal(`CONTRIBUTING.md has no "## Package map" section`)
	}
	section, _, _ := strings.Cut(after, "\n## ")
	return section
}

var backticked = regexp.MustCompile("`([^`]+)`")

// mappedPaths are the folders a map row is about: the backticked paths of its first cell.
func mappedPaths(section string) []string {
	var paths []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		firstCell := strings.SplitN(line, "|", 3)[1]
		for _, m := range backticked.FindAllStringSubmatch(firstCell, -1) {
			paths = append(paths, strings.TrimSuffix(m[1], "/"))
		}
	}
	return paths
}

// goPackageDirs are the folders holding .go files, relative to the repository, but for test
// data, build output and hidden folders.
func goPackageDirs(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != repoRoot && (name == "testdata" || name == "bin" || name == "vendor" ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(repoRoot, filepath.Dir(path))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs
}
