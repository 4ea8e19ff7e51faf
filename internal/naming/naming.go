// Package naming holds the names the controllers write that other code must spell the same
// way: the label-safe hash of an object name and the field manager of the controllers.
package naming

import (
	"fmt"
	"hash/fnv"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner names the agent-sandbox controllers in managedFields.
const FieldOwner = client.FieldOwner("agent-sandbox-controller")

// NameHash is a short, label-safe stand-in for an object name (names may be longer than a label
// value allows): FNV-1a 32-bit as 8 hex characters.
func NameHash(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%08x", h.Sum32())
}
