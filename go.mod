module github.com/aerfs/aerfs

go 1.26.8

require (
	github.com/gowebpki/jcs v1.0.2
	golang.org/x/mod v0.42.0
)

require go.yaml.in/yaml/v3 v3.0.6 // indirect
