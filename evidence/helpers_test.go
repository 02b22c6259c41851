package evidence

import (
	"crypto/rand"

	"golang.org/x/mod/sumdb/note"
)

func noteGenerate(name string) (string, string, error) { return note.GenerateKey(rand.Reader, name) }
func noteSigner(skey string) (note.Signer, error)      { return note.NewSigner(skey) }
