package interp_test

import (
	"context"
	"os"
	"testing"

	"github.com/ansible-bridge/ansible-bridge/interp"
)

// benchModule measures warm RunModule latency for a wrapper.
// AB_BENCH_PYTHON names the target python to run it with (default:
// ansible's).
func benchModule(b *testing.B, w []byte) {
	c := startAgent(b, agentEnv{Python: os.Getenv("AB_BENCH_PYTHON")})
	ctx := context.Background()
	if _, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(b, w)}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := c.RunModule(ctx, interp.ModuleRequest{Wrapper: parsed(b, w)})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(err, res)
		}
	}
	b.ReportMetric(float64(c.Stats().BytesSent)/float64(b.N+1), "wire-B/op")
}

func BenchmarkRunModuleWarm(b *testing.B) {
	ws := wrappers(b, job{"ping", map[string]any{}}, job{"command", map[string]any{"_raw_params": "true"}})
	b.Run("ping", func(b *testing.B) { benchModule(b, ws[0]) })
	b.Run("command", func(b *testing.B) { benchModule(b, ws[1]) })
	b.Run("fake", func(b *testing.B) { benchModule(b, fakeWrapper(b, map[string]any{})) })
}

func BenchmarkPing(b *testing.B) {
	c := startAgent(b, agentEnv{})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Ping(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
