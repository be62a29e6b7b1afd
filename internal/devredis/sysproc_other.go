//go:build !linux

package devredis

import "syscall"

// sysProcAttr returns nil, leaving redis-server in the caller's process
// group: without Linux's Pdeathsig, that is what lets a Ctrl-C in the
// terminal stop it together with an example that does not call Close.
func sysProcAttr() *syscall.SysProcAttr {
	return nil
}
