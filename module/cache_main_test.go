package module

import (
	"os"
	"testing"

	"github.com/kpsim/kpsim/internal/testcache"
)

// TestMain keeps the tests out of the user's kpsim cache (testcache).
func TestMain(m *testing.M) {
	testcache.Setup()
	os.Exit(m.Run())
}
