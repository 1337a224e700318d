package interp

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
)

func TestDecodeZipCache(t *testing.T) {
	lit := func(i int) []byte {
		return []byte(base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("PK zip number %d %s", i, bytes.Repeat([]byte("x"), 1000)))))
	}
	a1, h1, err := decodeZip(lit(0))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := base64.StdEncoding.DecodeString(string(lit(0)))
	if !bytes.Equal(a1, want) || h1 != sha256.Sum256(want) {
		t.Fatal("decoded zip or hash wrong")
	}
	a2, h2, _ := decodeZip(lit(0))
	if &a2[0] != &a1[0] || h2 != h1 {
		t.Fatal("the same literal was decoded again")
	}
	for i := 1; i <= zipCacheSize; i++ {
		if _, _, err := decodeZip(lit(i)); err != nil {
			t.Fatal(err)
		}
	}
	a3, h3, _ := decodeZip(lit(0))
	if &a3[0] == &a1[0] || h3 != h1 || !bytes.Equal(a3, want) {
		t.Fatalf("after %d others the first literal is still cached, or decodes differently", zipCacheSize)
	}
	// Not canonical: an error every time, never a cached answer.
	bad := append(lit(1), '\n')
	for range 2 {
		if _, _, err := decodeZip(bad); !errors.Is(err, ErrNotAnsiballZ) {
			t.Fatalf("non-canonical literal: %v", err)
		}
	}
}
