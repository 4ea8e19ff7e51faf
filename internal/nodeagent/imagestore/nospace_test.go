package imagestore

import "syscall"

func errNoSpace() error { return syscall.ENOSPC }
