package policy

import "os"

// Load reads and parses the policy file at path. Errors name the file as
// path, so that "path:line" opens in an editor.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read policy: " + err.Error(), Hint: "check the path, or run aerfs init to write the default policy"}
	}
	return Parse(path, data)
}
