#pragma once

// The one place where Qt input events become Dear ImGui input. Debian 12
// ships Dear ImGui 1.86, which predates the event API of 1.87
// (io.AddMousePosEvent, io.AddKeyEvent); both are handled here, so moving to
// a newer ImGui touches only this file.

#include <QPointF>
#include <Qt>

struct ImGuiIO;
class QKeyEvent;

namespace meshscope::ui {

class ImGuiQtInput {
  public:
    static void setupKeyMap(ImGuiIO& io);
    static void mouseMove(ImGuiIO& io, QPointF pos);
    static void mouseLeave(ImGuiIO& io);
    static void mouseButton(ImGuiIO& io, Qt::MouseButton button, bool down);
    static void wheel(ImGuiIO& io, QPointF steps);  // in wheel notches (1 = one click)
    static void key(ImGuiIO& io, const QKeyEvent& event, bool down);
    static void modifiers(ImGuiIO& io, Qt::KeyboardModifiers mods);
};

}  // namespace meshscope::ui
