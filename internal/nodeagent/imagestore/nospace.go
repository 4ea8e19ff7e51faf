package imagestore

import (
	"errors"
	"strings"
	"syscall"
)

// IsNoSpace says whether err is a full disk (ENOSPC or EDQUOT), also when it only carries the
// text of one (runsc's answer through the shim is a string).
func IsNoSpace(err error) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, syscall.ENOSPC.Error()) || strings.Contains(s, syscall.EDQUOT.Error())
}
