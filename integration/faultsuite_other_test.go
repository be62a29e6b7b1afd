//go:build !linux

package integration

import "syscall"

// fsSysProcAttr returns nil: only Linux can tie a child's life to its parent's.
func fsSysProcAttr() *syscall.SysProcAttr { return nil }
