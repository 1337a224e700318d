package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// envReads walks the Go files of the module's packages linked into the
// binary and returns the environment variables they read: every
// "ANSIBLE_BRIDGE_…" string literal, and the literal first argument of
// os.Getenv, os.LookupEnv and the daemon's getenv (the shim's environment).
// A literal that is only a prefix ("ANSIBLE_BRIDGE_REAL_" + prog) is
// returned with its trailing underscore.
func envReads(t *testing.T) map[string]string {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}|{{join .GoFiles \",\"}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	reads := map[string]string{} // name -> where
	bridgeVar := regexp.MustCompile(`^ANSIBLE_BRIDGE_[A-Z0-9_]*$`)
	envName := regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	fset := token.NewFileSet()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, files, _ := strings.Cut(line, "|")
		if dir != root && !strings.HasPrefix(dir, root+string(filepath.Separator)) {
			continue // a dependency outside the module
		}
		for _, name := range strings.Split(files, ",") {
			if name == "" {
				continue
			}
			path := filepath.Join(dir, name)
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, path)
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					if v, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && bridgeVar.MatchString(v) {
						reads[v] = rel
					}
				case *ast.CallExpr:
					if !isEnvRead(n.Fun) || len(n.Args) == 0 {
						return true
					}
					arg := n.Args[0]
					if b, ok := arg.(*ast.BinaryExpr); ok && b.Op == token.ADD {
						arg = b.X // a prefix: "ANSIBLE_" + name
					}
					if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if v, err := strconv.Unquote(lit.Value); err == nil && envName.MatchString(v) {
							reads[v] = rel
						}
					}
				}
				return true
			})
		}
	}
	return reads
}

func isEnvRead(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" {
		return sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv"
	}
	return sel.Sel.Name == "getenv"
}

// TestHelpListsEnvironment compares the environment variables --help
// names with those the code reads, both ways for ANSIBLE_BRIDGE_*.
func TestHelpListsEnvironment(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
	reads := envReads(t)
	// Guards the scan itself: a few reads it must find.
	for _, want := range []string{"ANSIBLE_BRIDGE_SOCKET", "ANSIBLE_BRIDGE_FASTPATH", "ANSIBLE_BRIDGE_REAL_", "XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"} {
		if _, ok := reads[want]; !ok {
			t.Errorf("the scan did not find %s; found %v", want, reads)
		}
	}
	for name, where := range reads {
		re := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
		if strings.HasSuffix(name, "_") {
			re = regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `[A-Z]`)
		}
		if !re.MatchString(usage) {
			t.Errorf("%s (read in %s) is not in --help", name, where)
		}
	}
	for _, name := range regexp.MustCompile(`\bANSIBLE_BRIDGE_[A-Z0-9_]*[A-Z0-9]`).FindAllString(usage, -1) {
		found := false
		for r := range reads {
			// A prefix counts only if it is the bridge's own ("ANSIBLE_" is not).
			if r == name || strings.HasSuffix(r, "_") && strings.HasPrefix(r, "ANSIBLE_BRIDGE_") && strings.HasPrefix(name, r) {
				found = true
			}
		}
		if !found {
			t.Errorf("--help lists %s, which nothing reads", name)
		}
	}
}

func TestVersionLine(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "example.com/ab", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-11-24T17:01:18Z"}}}
	got := versionLine(bi, true)
	for _, want := range []string{"module example.com/ab v1.2.3", "revision abc123+dirty 2026-11-24T17:01:18Z", "go go1.99.1"} {
		if !strings.Contains(got, want) {
			t.Errorf("versionLine = %q, want %q in it", got, want)
		}
	}
	// No VCS stamp: make build's revision, else says why there is none.
	bi.Settings = nil
	revision = "def456"
	t.Cleanup(func() { revision = "" })
	if got := versionLine(bi, true); !strings.Contains(got, "revision def456 (make build)") {
		t.Errorf("versionLine without VCS info = %q", got)
	}
	revision = ""
	if got := versionLine(bi, true); !strings.Contains(got, "revision unknown") {
		t.Errorf("versionLine without any revision = %q", got)
	}
}
