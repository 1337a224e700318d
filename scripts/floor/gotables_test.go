package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var update = flag.Bool("update", false, "rewrite c/gotables.h from this Go's Unicode tables")

// goTables is c/gotables.h: the Unicode tables of the Go standard library
// that the reference floor's output depends on, for the C floor's
// strconv.IsPrint (%q of non-ASCII text) and unicode.ToLower
// (strings.ToLower of an -o keyword).
func goTables() string {
	var b strings.Builder
	fmt.Fprintf(&b, `/*
 * gotables.h: the Unicode tables of Go's standard library that floor.c
 * needs to print what main.go prints (Unicode %s). Generated: do not edit.
 * TestGoTables (scripts/floor/gotables_test.go) checks it against the Go
 * that runs the tests; regenerate it with
 *
 *     go test ./scripts/floor -run TestGoTables -update
 */
#include <stdint.h>

struct go_range {
	int32_t lo, hi;
};

/* go_print: the runes from U+0080 up that strconv.IsPrint reports. */
static const struct go_range go_print[] = {
`, unicode.Version)
	var ranges []string
	for r, lo := rune(0x80), rune(-1); r <= unicode.MaxRune+1; r++ {
		in := r <= unicode.MaxRune && strconv.IsPrint(r)
		switch {
		case in && lo < 0:
			lo = r
		case !in && lo >= 0:
			ranges = append(ranges, fmt.Sprintf("{0x%04x, 0x%04x}", lo, r-1))
			lo = -1
		}
	}
	writeTable(&b, ranges, 5)
	fmt.Fprintf(&b, `};

/* go_lower: unicode.CaseRanges from U+0080 up, with the delta of their
 * lower-case mapping (GO_UPPER_LOWER: alternating upper and lower case). */
enum { GO_UPPER_LOWER = 0x%x };

struct go_case_range {
	int32_t lo, hi, delta;
};

static const struct go_case_range go_lower[] = {
`, unicode.UpperLower)
	ranges = nil
	for _, c := range unicode.CaseRanges {
		if d := c.Delta[unicode.LowerCase]; c.Lo >= 0x80 && d != 0 {
			delta := strconv.Itoa(int(d))
			if d == unicode.UpperLower {
				delta = "GO_UPPER_LOWER"
			}
			ranges = append(ranges, fmt.Sprintf("{0x%04x, 0x%04x, %s}", c.Lo, c.Hi, delta))
		}
	}
	writeTable(&b, ranges, 4)
	b.WriteString("};\n")
	return b.String()
}

func writeTable(b *strings.Builder, items []string, perLine int) {
	for i, it := range items {
		if i%perLine == 0 {
			b.WriteString("\t")
		}
		b.WriteString(it + ",")
		if i%perLine == perLine-1 || i == len(items)-1 {
			b.WriteString("\n")
		} else {
			b.WriteString(" ")
		}
	}
}

// TestGoTables checks c/gotables.h against this Go's tables: a Go with
// another Unicode version quotes other runes, and the C floor must follow.
func TestGoTables(t *testing.T) {
	want := goTables()
	if *update {
		if err := os.WriteFile("c/gotables.h", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("c/gotables.h")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("c/gotables.h is not this Go's Unicode %s tables: run go test ./scripts/floor -run TestGoTables -update", unicode.Version)
	}
	// The tables are what the C floor's to_lower and is_print assume.
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if unicode.ToLower(r) != toLowerFromTable(r) {
			t.Fatalf("go_lower gives U+%04X for U+%04X, unicode.ToLower U+%04X", toLowerFromTable(r), r, unicode.ToLower(r))
		}
	}
}

// toLowerFromTable is floor.c's to_lower, over unicode.CaseRanges.
func toLowerFromTable(r rune) rune {
	for _, c := range unicode.CaseRanges {
		if d := c.Delta[unicode.LowerCase]; c.Lo >= 0x80 && d != 0 && rune(c.Lo) <= r && r <= rune(c.Hi) {
			if d == unicode.UpperLower {
				return rune(c.Lo) + ((r - rune(c.Lo)) | 1)
			}
			return r + d
		}
	}
	return r
}
