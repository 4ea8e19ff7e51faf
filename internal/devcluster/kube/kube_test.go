package kube

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReadYAMLDirReadsEveryManifestButTheKustomization(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"b.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n---\n# only a comment\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: c}\n",
		"a.yaml":             "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
		"kustomization.yaml": "resources: [a.yaml, b.yaml]\n",
		"notes.txt":          "not a manifest",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := ReadYAMLDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if want := []string{"Namespace/a", "ConfigMap/b", "Secret/c"}; !slices.Equal(got, want) {
		t.Errorf("ReadYAMLDir = %v, want %v (files in name order, empty documents skipped)", got, want)
	}
}

func TestReadYAMLDirRefusesADirWithoutManifests(t *testing.T) {
	if _, err := ReadYAMLDir(t.TempDir()); err == nil {
		t.Error("an empty directory read as no objects, want an error")
	}
}
