// Package reason gives an error's own reason ("address already in use", "no such file or directory")
// without Go's wrapping, which repeats the operation and the path or address the message already names.
package reason

import (
	"net"
	"os"
)

// Of is err's reason: the error inside an *os.PathError, *os.LinkError or *net.OpError, else err itself.
func Of(err error) error {
	switch wrapped := err.(type) {
	case *os.PathError:
		return wrapped.Err
	case *os.LinkError:
		return wrapped.Err
	case *net.OpError:
		if wrapped.Err != nil {
			return wrapped.Err
		}
	}
	return err
}
