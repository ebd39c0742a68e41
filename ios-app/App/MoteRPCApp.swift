import SwiftUI
import RPCAppCore

/// The Mote RPC app: one screen (ContentView) over RPCAppCore's ServerController.
///
/// iOS suspends an app soon after it leaves the screen, and a suspended app's sockets stop
/// answering: the server runs while the app is in front. Going to the background stops it
/// (RPCViewModel.scenePhaseChanged); coming back starts it again with the same settings.
@main
struct MoteRPCApp: App {
    @StateObject private var model = RPCViewModel(store: UserDefaultsSettingsStore())
    @Environment(\.scenePhase) private var scenePhase

    var body: some Scene {
        WindowGroup {
            ContentView(model: model)
        }
        .onChange(of: scenePhase) { phase in
            model.scenePhaseChanged(phase)
        }
    }
}
