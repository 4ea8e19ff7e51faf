package v1beta1

import (
	"fmt"
	"hash/fnv"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner names the agent-sandbox controllers in managedFields; admission policies and
// tests that tell the controllers' writes from others' spell it the same way.
const FieldOwner = client.FieldOwner("agent-sandbox-controller")

// NameHash is a short, label-safe stand-in for an object name (names may be longer than a label
// value allows): FNV-1a 32-bit as 8 hex characters. SandboxNameHashLabel and the extensions'
// TemplateRefHashLabel and WarmPoolLabel carry it.
func NameHash(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%08x", h.Sum32())
}
