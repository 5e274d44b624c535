package nftablesfake

// What the external tests share with the fake's own encoding.
var (
	AppendVerdictExpr = appendVerdictExpr
	CommentData       = commentData
)
