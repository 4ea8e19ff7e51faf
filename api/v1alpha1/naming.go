package v1alpha1

import agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"

// FieldOwner names the agent-sandbox controllers in managedFields (v1beta1's, the one source).
const FieldOwner = agentsv1beta1.FieldOwner

// NameHash is v1beta1's NameHash: a short, label-safe stand-in for an object name.
func NameHash(name string) string { return agentsv1beta1.NameHash(name) }
