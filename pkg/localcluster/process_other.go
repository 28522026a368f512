//go:build !linux

package localcluster

import "syscall"

// processAttributes: a process group of its own. Without Linux's parent-death signal, the
// processes outlive this program only if it is killed before Stop runs (SIGKILL).
func processAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
