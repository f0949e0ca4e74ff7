import Foundation
import LinkRelayCore
import LinkRelaySupport
import NIOEmbedded
import Testing

@testable import LinkRelayServer

@Suite("Channel feed", .timeLimit(.minutes(1)))
struct ChannelFeedTests {
    /// A memory store holding a waiting session, a feed on `loop` after seq 0, and what it has stepped.
    struct Fixture {
        let loop = EmbeddedEventLoop()
        let store = MemorySessionStore()
        let hub = ChannelHub()
        let steps = Locked<[String]>([])
        var session = Session(
            id: "ses_feed", linkKey: "link-key", channelToken: "channel-token", createdAt: Self.at,
            expiresAt: Self.at.addingTimeInterval(300), correlationId: "corr-1", authToken: "auth-token",
            clientRequestId: "req-1", phoneNumber: "2001004014", finalTargetUrl: "https://relay.example/l/link-key",
            idempotencyKey: nil, requestFingerprint: "fp")
        static let at = Date(timeIntervalSinceReferenceDate: 0)

        init() async throws {
            let waiting = session.record(.waiting(expiresAt: Self.at.addingTimeInterval(300)), at: Self.at)
            try await store.insert(session, event: waiting)
        }

        func feed() -> ChannelFeed {
            ChannelFeed(
                store: store, hub: hub, eventLoop: loop, sessionID: session.id, cursor: 0, wakeAt: nil
            ) { [steps] step in
                steps.withLock { $0.append(Self.describe(step)) }
            }
        }

        /// A feed that has replayed what the store held: the waiting event.
        func replayedFeed() -> ChannelFeed {
            let feed = feed()
            loop.run()
            #expect(stepped == ["replayed [1]"])
            return feed
        }

        var stepped: [String] { steps.withLock { $0 } }

        /// Stores the next events of the session (as a commit would) and returns them.
        mutating func commit(_ kinds: [SessionEvent.Kind]) async throws -> [SessionEvent] {
            let before = session.version
            let events = kinds.map { session.record($0, at: Self.at) }
            session.version += 1
            #expect(try await store.update(session, expectedVersion: before, appending: events, reporting: []) {})
            return events
        }

        static func describe(_ step: ChannelFeed.Step) -> String {
            switch step {
            case .replayed(let events): "replayed \(events.map(\.seq))"
            case .events(let events): "events \(events.map(\.seq))"
            case .tick: "tick"
            case .shutdown: "shutdown"
            case .failed: "failed"
            }
        }
    }

    @Test("Events committed on the channel's own event loop are handed to it before the commit's caller goes on")
    func sameLoopEventsAtOnce() async throws {
        var fixture = try await Fixture()
        let feed = fixture.replayedFeed()
        defer { feed.end() }

        let tapped = try await fixture.commit([.tapped(asc: true)])
        fixture.hub.publish(sessionID: fixture.session.id, events: tapped)
        #expect(fixture.stepped == ["replayed [1]", "events [2]"], "written before the landing's answer")
    }

    @Test("Other signals on the loop's own thread still wait for the loop's queue")
    func otherSignalsQueued() async throws {
        let fixture = try await Fixture()
        let feed = fixture.replayedFeed()
        defer { feed.end() }
        fixture.hub.beginShutdown()
        #expect(fixture.stepped == ["replayed [1]"])
        fixture.loop.run()
        #expect(fixture.stepped == ["replayed [1]", "shutdown"])
    }

    @Test("Events that skip a seq handed out elsewhere are read from the store, in order, once")
    func gapReadFromStore() async throws {
        var fixture = try await Fixture()
        let feed = fixture.replayedFeed()
        defer { feed.end() }

        let tapped = try await fixture.commit([.tapped(asc: true)])
        let result = try await fixture.commit([.cancelled()])
        fixture.hub.publish(sessionID: fixture.session.id, events: result)
        fixture.loop.run()
        #expect(fixture.stepped == ["replayed [1]", "events [2, 3]"])
        // The earlier signal, arriving late, repeats nothing.
        fixture.hub.publish(sessionID: fixture.session.id, events: tapped)
        fixture.loop.run()
        #expect(fixture.stepped == ["replayed [1]", "events [2, 3]"])
    }
}
