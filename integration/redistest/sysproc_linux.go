package redistest

import "syscall"

// sysProcAttr has the kernel kill redis-server if the test binary dies
// without running its cleanups (for example on a -timeout panic), so that
// no server outlives the test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
