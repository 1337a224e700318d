package procstat

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestAllAndDescendants(t *testing.T) {
	var me *Proc
	procs := All()
	for i := range procs {
		if procs[i].PID == os.Getpid() {
			me = &procs[i]
		}
	}
	if me == nil || me.PPID != os.Getppid() || me.Comm == "" {
		t.Fatalf("this process in All(): %+v, want pid %d, ppid %d and a name", me, os.Getpid(), os.Getppid())
	}
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	if d := Descendants(os.Getpid()); !slices.Contains(d, child.Process.Pid) {
		t.Errorf("Descendants(%d) = %v, without the child %d", os.Getpid(), d, child.Process.Pid)
	}
}
