package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/ansible-bridge/ansible-bridge/bridge/journal"
	"github.com/ansible-bridge/ansible-bridge/fusefs"
)

// mountSource shows the daemon's state in the debug file system.
type mountSource struct{ s *Server }

var _ fusefs.Source = mountSource{}

func (m mountSource) Status() ([]byte, error) {
	b, err := json.MarshalIndent(m.s.Status(), "", "  ")
	return append(b, '\n'), err
}

func (m mountSource) Journal() *journal.Journal { return m.s.journal }

// becomeSep separates a target from a become user in the debug view's
// target names: "abtest@host:22/become-root" (shown as %2F).
const becomeSep = "/become-"

func (m mountSource) Targets() []fusefs.Target {
	var out []fusefs.Target
	for _, t := range m.s.targets.all() {
		out = append(out, fusefs.Target{Name: t.label})
		users := map[string]bool{}
		for _, st := range t.house.mentioned("") {
			if u := st.ranAs(); u != "" {
				users[u] = true
			}
		}
		for u := range users {
			out = append(out, fusefs.Target{Name: t.label + becomeSep + u})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (m mountSource) target(label string) *target {
	for _, t := range m.s.targets.all() {
		if t.label == label {
			return t
		}
	}
	return nil
}

// TempDirs lists a target's shared temp dirs; for "target/become-USER",
// those whose module ran as USER.
func (m mountSource) TempDirs(label string) []fusefs.TempDir {
	label, user, _ := strings.Cut(label, becomeSep)
	t := m.target(label)
	if t == nil {
		return nil
	}
	var out []fusefs.TempDir
	for _, st := range t.house.mentioned("") {
		if user != "" && st.ranAs() != user {
			continue
		}
		out = append(out, tempDirView(st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// tempDirView is what the bridge knows of a temp dir, from memory (as
// fusefs.Source asks): the files it held or saw uploaded.
func tempDirView(st *sharedTemp) fusefs.TempDir {
	st.mu.Lock()
	td := fusefs.TempDir{Name: path.Base(st.dir), Path: st.dir, OnTarget: st.onTarget, Mtime: st.created}
	for name, f := range st.files {
		td.Files = append(td.Files, fusefs.TempFile{
			Name: name, Size: f.size, Mode: f.mode, Mtime: f.mtime, Held: !f.onTarget, Data: f.data,
		})
	}
	st.mu.Unlock()
	sort.Slice(td.Files, func(i, j int) bool { return td.Files[i].Name < td.Files[j].Name })
	return td
}

func (m mountSource) ReadRemote(ctx context.Context, label, p string) ([]byte, error) {
	label, _, _ = strings.Cut(label, becomeSep)
	t := m.target(label)
	if t == nil {
		return nil, fmt.Errorf("target %s: %w", label, fs.ErrNotExist)
	}
	if ag := t.anyAgent(); ag != nil {
		// Through the interpreter: no SFTP session to open.
		return ag.GetFile(ctx, p)
	}
	c, sc, err := t.useSFTP(ctx, nopPrompter{})
	if err != nil {
		return nil, err
	}
	defer c.release()
	f, err := sc.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxHeldFile))
}

// nopPrompter refuses to prompt: the mount reads over connections that
// are up, and never logs in on its own.
type nopPrompter struct{}

func (nopPrompter) Prompt(context.Context, string, bool) (string, error) {
	return "", fmt.Errorf("no terminal to prompt on")
}

// mounts tracks the daemon's debug mounts, unmounted when it stops.
type mounts struct {
	mu   sync.Mutex
	list []*fusefs.Mounted
}

// Mount exposes the daemon's state under dir (see package fusefs) until
// the daemon stops. It fails with a one-line reason where FUSE is missing.
func (s *Server) Mount(ctx context.Context, dir string) error {
	m, err := fusefs.Mount(ctx, dir, mountSource{s}, s.log.WithField("mount", dir))
	if err != nil {
		return err
	}
	s.mounts.mu.Lock()
	s.mounts.list = append(s.mounts.list, m)
	s.mounts.mu.Unlock()
	s.log.WithField("mount", m.Dir()).Info("debug file system mounted")
	return nil
}

func (s *Server) unmountAll() {
	s.mounts.mu.Lock()
	list := s.mounts.list
	s.mounts.list = nil
	s.mounts.mu.Unlock()
	for _, m := range list {
		if err := m.Unmount(); err != nil {
			s.log.WithError(err).WithField("mount", m.Dir()).Warn("unmount")
		}
	}
}

// absDir makes a mount point absolute against the requester's cwd.
func absDir(cwd, dir string) string {
	if path.IsAbs(dir) || cwd == "" {
		return dir
	}
	return path.Join(cwd, dir)
}
