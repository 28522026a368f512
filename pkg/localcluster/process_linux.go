package localcluster

import "syscall"

// processAttributes: a process group of its own, and SIGKILL when this program dies.
func processAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
