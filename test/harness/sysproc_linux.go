//go:build linux

package harness

import "syscall"

// sysProcAttr puts the child in its own process group, so Stop can kill the
// group, and asks the kernel to SIGKILL it if the test process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
