//go:build unix && !linux

package harness

import "syscall"

// sysProcAttr puts the child in its own process group, so Stop can kill the
// group. (Pdeathsig exists only on Linux.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
