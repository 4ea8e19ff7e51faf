// Package convstate keeps, in one annotation per kind, the fields an object's served version
// cannot represent, so that conversions between the API versions are lossless both ways.
package convstate

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pop decodes the annotation key of meta into into and removes it. It reports whether the
// annotation was there and decoded. An empty annotation map left behind becomes nil. An
// annotation that is not ours to read (not JSON of the expected shape, e.g. edited by hand) is
// dropped and reported as absent rather than failing the conversion: failing would make the
// object unreadable in the other version.
func Pop(meta *metav1.ObjectMeta, key string, into any) bool {
	raw, ok := meta.Annotations[key]
	if !ok {
		return false
	}
	delete(meta.Annotations, key)
	if len(meta.Annotations) == 0 {
		meta.Annotations = nil
	}
	return json.Unmarshal([]byte(raw), into) == nil
}

// Put stores state as JSON in the annotation key of meta, unless keep is false (nothing to keep).
func Put(meta *metav1.ObjectMeta, key string, state any, keep bool) error {
	if !keep {
		return nil
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("annotation %s: %w", key, err)
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = string(raw)
	return nil
}

// Peek decodes the annotation key of annotations into into without changing anything; it
// reports whether the annotation was there and decoded.
func Peek(annotations map[string]string, key string, into any) bool {
	raw, ok := annotations[key]
	return ok && json.Unmarshal([]byte(raw), into) == nil
}
