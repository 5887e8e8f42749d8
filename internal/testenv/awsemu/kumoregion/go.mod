// The kumo emulator's child command is a module of its own, as
// hack/testbin is, so kumo and its dependencies stay out of kiln's go.mod.
// Versions shared with kiln's go.mod are pinned to kiln's (aws-sdk-go-v2,
// smithy-go, x/crypto, x/sys …), so the emulator runs what it ran before.
module github.com/kilnctl/kiln/internal/testenv/awsemu/kumoregion

go 1.26.8

require github.com/sivchari/kumo v0.33.1

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
	github.com/cedar-policy/cedar-go v1.8.0 // indirect
	github.com/fxamacker/cbor/v2 v2.9.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/exp v0.0.0-20231006140011-7918f672742d // indirect
	golang.org/x/sys v0.50.0 // indirect
)
