package interp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// pyFrameName is agent.py's name for the frame type Go calls frameName:
// frameStdinEOF is T_STDIN_EOF.
func pyFrameName(goName string) string {
	s := strings.TrimPrefix(goName, "frame")
	return "T_" + strings.ToUpper(regexp.MustCompile(`([a-z])([A-Z])`).ReplaceAllString(s, "${1}_${2}"))
}

// goFrameTypes reads protocol.go's frame* constants and their values.
func goFrameTypes(t *testing.T) map[string]int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "protocol.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "frame") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.INT {
					t.Fatalf("protocol.go: %s is not an integer literal", name.Name)
				}
				v, err := strconv.Atoi(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out[pyFrameName(name.Name)] = v
			}
		}
	}
	return out
}

// TestAgentConstants: agent.py's frame types, magic, protocol version,
// header, frame limit and zip marker are this package's (agent_test.py's
// ProtocolConstantsTest checks the same from the Python side).
func TestAgentConstants(t *testing.T) {
	src := string(AgentSource)
	py := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^(T_[A-Z_]+) = (\d+)$`).FindAllStringSubmatch(src, -1) {
		v, _ := strconv.Atoi(m[2])
		py[m[1]] = v
	}
	gov := goFrameTypes(t)
	if len(gov) < 7 {
		t.Fatalf("protocol.go: %d frame types found", len(gov))
	}
	for name, v := range gov {
		if pv, ok := py[name]; !ok || pv != v {
			t.Errorf("agent.py: %s = %d (found %v), protocol.go has %d", name, pv, ok, v)
		}
	}
	for name, v := range py {
		if _, ok := gov[name]; !ok {
			t.Errorf("agent.py: %s = %d has no frame type in protocol.go", name, v)
		}
	}

	one := func(re string) string {
		m := regexp.MustCompile(`(?m)` + re).FindStringSubmatch(src)
		if m == nil {
			t.Fatalf("agent.py: no line matches %s", re)
		}
		return m[1]
	}
	magic, err := strconv.Unquote(`"` + one(`^MAGIC = b'((?:[^'\\]|\\.)*)'$`) + `"`)
	if err != nil || magic != Magic {
		t.Errorf("agent.py: MAGIC is %q (%v), protocol.go's Magic %q", magic, err, Magic)
	}
	if v := one(`^PROTOCOL = (\d+)$`); v != strconv.Itoa(Protocol) {
		t.Errorf("agent.py: PROTOCOL = %s, protocol.go's Protocol %d", v, Protocol)
	}
	// >IBI: uint32 length | uint8 type | uint32 id.
	if f := one(`^HDR = struct\.Struct\('([^']*)'\)$`); f != ">IBI" || headerSize != 9 {
		t.Errorf("agent.py: HDR format %q, protocol.go's headerSize %d (want >IBI, 9)", f, headerSize)
	}
	if v, _ := strconv.Atoi(one(`^MAX_FRAME = 1 << (\d+)$`)); 1<<v != maxFrame {
		t.Errorf("agent.py: MAX_FRAME = 1 << %d, protocol.go's maxFrame %d", v, maxFrame)
	}
	if v := one(`^ZIP_MARKER = b'([^'\\]*)'$`); v != zipMarker {
		t.Errorf("agent.py: ZIP_MARKER = %q, module.go's zipMarker %q", v, zipMarker)
	}
}

func TestPyFrameName(t *testing.T) {
	for goName, want := range map[string]string{"frameReq": "T_REQ", "frameStdinEOF": "T_STDIN_EOF", "frameCancel": "T_CANCEL"} {
		if got := pyFrameName(goName); got != want {
			t.Errorf("pyFrameName(%s) = %s, want %s", goName, got, want)
		}
	}
}
