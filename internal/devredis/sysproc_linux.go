package devredis

import "syscall"

// sysProcAttr puts redis-server in its own process group, so that a Ctrl-C
// in the terminal reaches only the example (which may still need Redis
// while it shuts down), and has the kernel kill redis-server when the
// example exits without calling Close (log.Fatal, an unhandled signal).
//
// Pdeathsig fires when the OS thread that started the child exits, which
// the Go runtime does only for a goroutine that exits while locked to its
// thread; callers must not call Open from such a goroutine.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
