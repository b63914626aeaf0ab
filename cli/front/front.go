// Package front is the room of the lean `pinniped` binary (cmd/pinniped),
// which kubectl starts before nearly every request: fastlogin answers a
// cached login by itself, handoff hands everything else to pinniped-engine
// beside it. Its test holds what that binary may link, so that it starts
// in about the time of a hello world.
package front

// Binary is the lean front's main package.
const Binary = "github.com/pinniped-kit/pinniped/cmd/pinniped"
