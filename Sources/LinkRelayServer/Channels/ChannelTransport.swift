enum ChannelTransport: String, CaseIterable, Sendable {
    case websocket
    case sse
    case longpoll
}
