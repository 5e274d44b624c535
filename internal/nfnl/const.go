// Package nfnl is the nf_tables netlink codec shared by package nftables
// (which sends requests and reads dumps), package nftablesfake (which
// reads requests and sends dumps) and package iptables (whose in-process
// read of an iptables-nft table dumps its chains and rules): one encoder
// and one decoder per object, append-style and without allocation, so
// that the sides cannot drift apart. It frames and parses messages only;
// each user opens and drives its own socket. Expressions are encoded by
// github.com/google/nftables/expr; this package only walks them (for the
// references a kernel checks, and for the expressions iptables reads).
package nfnl

// Netlink and nfnetlink framing.
const (
	HdrLen    = 16 // struct nlmsghdr
	GenLen    = 4  // struct nfgenmsg
	AttrAlign = 4

	MsgNoop  = 0x1
	MsgError = 0x2
	MsgDone  = 0x3

	FlagRequest  = 0x1
	FlagMulti    = 0x2
	FlagAck      = 0x4
	FlagEcho     = 0x8
	FlagDumpIntr = 0x10
	// New-request flags.
	FlagReplace = 0x100
	FlagExcl    = 0x200
	FlagCreate  = 0x400
	FlagAppend  = 0x800
	// Get-request flags.
	FlagDump = 0x300
	// NLMSG_ERROR flags.
	FlagCapped  = 0x100
	FlagAckTLVs = 0x200

	// NLMSGERR_ATTR_*.
	ErrAttrMsg  = 1
	ErrAttrOffs = 2

	NestedFlag = 0x8000 // NLA_F_NESTED
	TypeMask   = 0x3fff

	BatchBegin = 0x10 // NFNL_MSG_BATCH_BEGIN
	BatchEnd   = 0x11 // NFNL_MSG_BATCH_END

	SubsysNFTables = 10 // NFNL_SUBSYS_NFTABLES
	NFNetlinkV0    = 0
)

// NFT_MSG_* message types (without the subsystem byte).
const (
	MsgNewTable       = 0
	MsgGetTable       = 1
	MsgDelTable       = 2
	MsgNewChain       = 3
	MsgGetChain       = 4
	MsgDelChain       = 5
	MsgNewRule        = 6
	MsgGetRule        = 7
	MsgDelRule        = 8
	MsgNewSet         = 9
	MsgGetSet         = 10
	MsgDelSet         = 11
	MsgNewSetElem     = 12
	MsgGetSetElem     = 13
	MsgDelSetElem     = 14
	MsgNewGen         = 15
	MsgGetGen         = 16
	MsgDestroyTable   = 26
	MsgDestroyChain   = 27
	MsgDestroyRule    = 28
	MsgDestroySet     = 29
	MsgDestroySetElem = 30
)

// Type returns the netlink message type of nf_tables message m.
func Type(m uint16) uint16 { return SubsysNFTables<<8 | m }

// Families (NFPROTO_*).
const (
	FamilyINet = 1
	FamilyIPv4 = 2
	FamilyIPv6 = 10
)

// NFTA_TABLE_*.
const (
	TableName     = 1
	TableFlags    = 2
	TableUse      = 3
	TableHandle   = 4
	TableUserData = 6
)

// NFTA_CHAIN_*, NFTA_HOOK_*.
const (
	ChainTable    = 1
	ChainHandle   = 2
	ChainName     = 3
	ChainHook     = 4
	ChainPolicy   = 5
	ChainUse      = 6
	ChainType     = 7
	ChainCounters = 8
	ChainFlags    = 10
	ChainID       = 11
	ChainUserData = 12

	HookNum      = 1
	HookPriority = 2
	HookDev      = 3

	ChainFlagBase = 1 // NFT_CHAIN_BASE
)

// NFTA_RULE_*.
const (
	RuleTable      = 1
	RuleChain      = 2
	RuleHandle     = 3
	RuleExprs      = 4
	RulePosition   = 6
	RuleUserData   = 7
	RuleID         = 9
	RulePositionID = 10
	RuleChainID    = 11

	ListElem = 1 // NFTA_LIST_ELEM
	ExprName = 1 // NFTA_EXPR_NAME
	ExprData = 2 // NFTA_EXPR_DATA
)

// NFTA_SET_*, NFTA_SET_DESC_*, NFTA_SET_FIELD_*, NFT_SET_* flags.
const (
	SetTable    = 1
	SetName     = 2
	SetFlags    = 3
	SetKeyType  = 4
	SetKeyLen   = 5
	SetDataType = 6
	SetDataLen  = 7
	SetPolicy   = 8
	SetDesc     = 9
	SetID       = 10
	SetUserData = 13
	SetHandle   = 16

	DescSize   = 1
	DescConcat = 2
	FieldLen   = 1

	SetAnonymous = 0x1
	SetConstant  = 0x2
	SetInterval  = 0x4
	SetMap       = 0x8
	SetTimeout   = 0x10
	SetEval      = 0x20
	SetObject    = 0x40
	SetConcat    = 0x80
)

// NFTA_SET_ELEM_LIST_*, NFTA_SET_ELEM_*, NFT_SET_ELEM_* flags, NFTA_DATA_*,
// NFTA_VERDICT_*.
const (
	ElemListTable = 1
	ElemListSet   = 2
	ElemListElems = 3
	ElemListSetID = 4

	ElemKey      = 1
	ElemData     = 2
	ElemFlags    = 3
	ElemUserData = 6
	ElemKeyEnd   = 10

	ElemIntervalEnd = 0x1
	ElemCatchall    = 0x2

	DataValue   = 1
	DataVerdict = 2

	VerdictCode  = 1
	VerdictChain = 2
)

// Verdict codes (NF_* and NFT_*), as signed 32-bit values.
const (
	VerdictDrop     int32 = 0
	VerdictAccept   int32 = 1
	VerdictContinue int32 = -1
	VerdictBreak    int32 = -2
	VerdictJump     int32 = -3
	VerdictGoto     int32 = -4
	VerdictReturn   int32 = -5
)

// Data types of set keys and data (nft's datatype numbers), and
// NFT_DATA_VERDICT.
const (
	DataTypeVerdict = 1
	DataTypeMark    = 19
	DataTypeIPv4    = 7
	DataTypeIPv6    = 8
	DataTypeProto   = 12
	DataTypePort    = 13
	DataTypeIfname  = 41
	DataVerdictType = 0xffffff00 // NFT_DATA_VERDICT, the data type of a verdict map
	TypeBits        = 6          // TYPE_BITS: shift of a concatenation's next type
)

// NFTA_GEN_*.
const GenID = 1

// NFTA_IMMEDIATE_*, NFTA_LOOKUP_*, NFTA_COUNTER_*.
const (
	ImmediateDreg = 1
	ImmediateData = 2

	LookupSet   = 1
	LookupSreg  = 2
	LookupDreg  = 3
	LookupSetID = 4
	LookupFlags = 5

	CounterBytes   = 1
	CounterPackets = 2

	RegVerdict = 0
)

// Hooks (NF_INET_*).
const (
	HookPrerouting  = 0
	HookInput       = 1
	HookForward     = 2
	HookOutput      = 3
	HookPostrouting = 4
)

// Policies of a base chain.
const (
	PolicyDrop   = 0
	PolicyAccept = 1
)

// Limits of the kernel.
const (
	NameMaxLen     = 256 // NFT_NAME_MAXLEN, with the NUL
	UserDataMaxLen = 256 // NFT_USERDATA_MAXLEN
	MaxAttrLen     = 0xffff
	RegSize        = 4  // NFT_REG32_SIZE
	MaxKeyLen      = 64 // sixteen 32-bit registers
)
