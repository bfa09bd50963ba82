#include "ui/canvas/imgui_qt_input.h"

#include <imgui.h>

#include <QKeyEvent>
#include <array>
#include <utility>

namespace meshscope::ui {

namespace {

int mouseIndex(Qt::MouseButton button) {
    switch (button) {
        case Qt::LeftButton:
            return 0;
        case Qt::RightButton:
            return 1;
        case Qt::MiddleButton:
            return 2;
        default:
            return -1;
    }
}

// Qt keys ImGui's own widgets need (text fields, navigation).
constexpr std::array<std::pair<int, ImGuiKey>, 17> kKeys = {{
    {Qt::Key_Tab, ImGuiKey_Tab},
    {Qt::Key_Left, ImGuiKey_LeftArrow},
    {Qt::Key_Right, ImGuiKey_RightArrow},
    {Qt::Key_Up, ImGuiKey_UpArrow},
    {Qt::Key_Down, ImGuiKey_DownArrow},
    {Qt::Key_PageUp, ImGuiKey_PageUp},
    {Qt::Key_PageDown, ImGuiKey_PageDown},
    {Qt::Key_Home, ImGuiKey_Home},
    {Qt::Key_End, ImGuiKey_End},
    {Qt::Key_Insert, ImGuiKey_Insert},
    {Qt::Key_Delete, ImGuiKey_Delete},
    {Qt::Key_Backspace, ImGuiKey_Backspace},
    {Qt::Key_Space, ImGuiKey_Space},
    {Qt::Key_Return, ImGuiKey_Enter},
    {Qt::Key_Escape, ImGuiKey_Escape},
    {Qt::Key_A, ImGuiKey_A},
    {Qt::Key_C, ImGuiKey_C},
}};

#if IMGUI_VERSION_NUM < 18700
// 1.86: io.KeysDown is indexed by a backend-chosen code mapped through
// io.KeyMap; the slot of each key is its position in kKeys.
int slotOf(int qtKey) {
    for (size_t i = 0; i < kKeys.size(); ++i)
        if (kKeys[i].first == qtKey) return int(i) + 1;
    return -1;
}
#endif

}  // namespace

void ImGuiQtInput::setupKeyMap([[maybe_unused]] ImGuiIO& io) {
#if IMGUI_VERSION_NUM < 18700
    for (size_t i = 0; i < kKeys.size(); ++i)
        io.KeyMap[kKeys[i].second] = int(i) + 1;
#endif
}

void ImGuiQtInput::mouseMove(ImGuiIO& io, QPointF pos) {
#if IMGUI_VERSION_NUM < 18700
    io.MousePos = ImVec2(float(pos.x()), float(pos.y()));
#else
    io.AddMousePosEvent(float(pos.x()), float(pos.y()));
#endif
}

void ImGuiQtInput::mouseLeave(ImGuiIO& io) {
#if IMGUI_VERSION_NUM < 18700
    io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
#else
    io.AddMousePosEvent(-FLT_MAX, -FLT_MAX);
#endif
}

void ImGuiQtInput::mouseButton(ImGuiIO& io, Qt::MouseButton button, bool down) {
    int i = mouseIndex(button);
    if (i < 0) return;
#if IMGUI_VERSION_NUM < 18700
    io.MouseDown[i] = down;
#else
    io.AddMouseButtonEvent(i, down);
#endif
}

void ImGuiQtInput::wheel(ImGuiIO& io, QPointF steps) {
#if IMGUI_VERSION_NUM < 18700
    io.MouseWheel += float(steps.y());
    io.MouseWheelH += float(steps.x());
#else
    io.AddMouseWheelEvent(float(steps.x()), float(steps.y()));
#endif
}

void ImGuiQtInput::modifiers(ImGuiIO& io, Qt::KeyboardModifiers mods) {
#if IMGUI_VERSION_NUM < 18700
    io.KeyCtrl = mods & Qt::ControlModifier;
    io.KeyShift = mods & Qt::ShiftModifier;
    io.KeyAlt = mods & Qt::AltModifier;
#else
    io.AddKeyEvent(ImGuiKey_ModCtrl, mods & Qt::ControlModifier);
    io.AddKeyEvent(ImGuiKey_ModShift, mods & Qt::ShiftModifier);
    io.AddKeyEvent(ImGuiKey_ModAlt, mods & Qt::AltModifier);
#endif
}

void ImGuiQtInput::key(ImGuiIO& io, const QKeyEvent& event, bool down) {
    modifiers(io, event.modifiers());
#if IMGUI_VERSION_NUM < 18700
    if (int slot = slotOf(event.key()); slot > 0) io.KeysDown[slot] = down;
#else
    for (const auto& [qt, key] : kKeys)
        if (qt == event.key()) io.AddKeyEvent(key, down);
#endif
    if (down)
        for (QChar c : event.text())
            if (c.isPrint()) io.AddInputCharacter(c.unicode());
}

}  // namespace meshscope::ui
