//go:build windows

package main

import (
	"context"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// watchResize: Windows has no SIGWINCH; the size stays what it was.
func watchResize(context.Context, int) (<-chan sdk.TermSize, func()) { return nil, func() {} }
