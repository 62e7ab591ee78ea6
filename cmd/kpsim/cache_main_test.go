package main

import (
	"testing"

	"github.com/kpsim/kpsim/internal/testcache"
)

// TestMain keeps the tests out of the user's kpsim cache (testcache).
func TestMain(m *testing.M) { testcache.Main(m) }
