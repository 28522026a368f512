package localcluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is one control-plane binary started by this package, with its output in a log file.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{}
	waitErr error
	// scanned is how far LeadingScheduler has read the log (it starts where the log file
	// ended when the process started: logs are appended to); acquired, whether it found the
	// Lease taken.
	scanned  int64
	acquired bool
}

// startProcess starts bin with args in its own process group, so that stopping it also stops
// anything it forked, and (on Linux) with a parent-death signal, so that it does not outlive
// this program if this program is killed before it can clean up.
func startProcess(name, logDir, bin string, args ...string) (*Process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w (run `make build`)", name, err)
	}
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = processAttributes()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, logFile: logFile, done: make(chan struct{}), scanned: logStart}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group and SIGKILL if it has not ended within grace.
func (p *Process) Stop(grace time.Duration) error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	return p.Kill()
}

// Kill sends SIGKILL to the process group and waits for the process to end.
func (p *Process) Kill() error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := syscall.Kill(-p.Pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s (pid %d): %w", p.Name, p.Pid(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.Pid())
	}
}

// GroupAlive reports whether any process of the process group is still running (zombies
// included until reaped), so that callers can check nothing was left behind.
func (p *Process) GroupAlive() bool {
	err := syscall.Kill(-p.Pid(), 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// firstLineContaining returns the first line of the file that contains substr ("" if none).
func firstLineContaining(path, substr string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, substr) {
			return line
		}
	}
	return ""
}
