package oidclogin

import "errors"

// ErrSwitchToDevice is returned by BrowserLogin when the person asked for
// the device flow; the caller runs DeviceLogin next. The browser flow's
// listener is closed by then, so a late callback cannot complete it.
var ErrSwitchToDevice = errors.New("switching to the device flow at the person's request")
