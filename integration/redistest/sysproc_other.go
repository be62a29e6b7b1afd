//go:build !linux

package redistest

import "syscall"

// sysProcAttr returns nil: outside Linux there is no portable way to tie
// the child's lifetime to the test binary's, so a server can outlive a test
// binary that dies without running its cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return nil
}
