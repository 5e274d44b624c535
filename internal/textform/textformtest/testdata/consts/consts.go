package consts

type Mode uint8

const (
	ModeA Mode = iota + 1
	ModeB
	modeHidden
	ModeC
)

const ModeD = Mode(9)

const (
	Other = 1
	ModeNot
)

const ModeE, ModeF Mode = 10, 11

type Other2 Mode

const ModeG Other2 = 1
