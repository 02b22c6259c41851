package configs

import (
	"bytes"
	"testing"
)

func TestDefaultPolicyEmbedded(t *testing.T) {
	if !bytes.Contains(DefaultPolicy, []byte("\nversion: 1\n")) {
		t.Error("the embedded default policy does not declare version 1")
	}
}
