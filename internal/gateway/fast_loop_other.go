//go:build !linux

package gateway

import "net"

// evLoop is Linux's (fast_loop_linux.go); elsewhere every fast-path
// connection has a goroutine.
type evLoop struct{}

func (s *fastServer) startLoops() ([]*evLoop, error)  { return nil, nil }
func stopLoops([]*evLoop)                             {}
func (*evLoop) ended() <-chan struct{}                { return nil }
func (*evLoop) shutdown() <-chan struct{}             { return nil }
func (*evLoop) closeAll()                             {}
func (s *fastServer) listenInLoops(net.Listener) bool { return false }
