# The model-based search (included from tuner/CMakeLists.txt): simulated annealing, the
# submodular batch pick and the XGBoost-driven tuner, as the library ktune_tuner_model.
add_library(ktune_tuner_model
  ${CMAKE_CURRENT_LIST_DIR}/simulated_annealing.cc
  ${CMAKE_CURRENT_LIST_DIR}/submodular_pick.cc
  ${CMAKE_CURRENT_LIST_DIR}/model_based_tuner.cc
  ${CMAKE_CURRENT_LIST_DIR}/transfer.cc
  ${CMAKE_CURRENT_LIST_DIR}/model_log.cc
  ${CMAKE_CURRENT_LIST_DIR}/tuning_session.cc
)
target_include_directories(ktune_tuner_model PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
target_link_libraries(ktune_tuner_model
  PUBLIC ktune_support ktune_schedule_space ktune_cost_model ktune_tuner
  PRIVATE $<BUILD_INTERFACE:ktune_warnings>)

# The session stamps its records with the ktune version.
