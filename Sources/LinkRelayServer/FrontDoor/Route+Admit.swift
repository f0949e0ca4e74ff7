extension Route {
    /// The route's guard, asked before any body byte is read: nil lets the request go on; an answer is
    /// sent instead. The routes branch (issue 47, item 2) replaces this stub with the real guards.
    func admit(_ request: inout RelayRequest) -> Answer? { nil }
}
