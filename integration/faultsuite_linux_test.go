package integration

import "syscall"

// fsSysProcAttr has the kernel kill a fault suite child if the test binary dies without running its
// cleanups, so that no child outlives the run.
func fsSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
