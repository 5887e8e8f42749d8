//go:build !unix

package gateway

import "net"

// alive cannot peek here: a connection the backend closed fails its
// request, which is sent again when it has no body.
func alive(net.Conn) bool { return true }
